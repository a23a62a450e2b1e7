"""The mind's outside capabilities: embeddings, reranker, language models, and their cost.

    protocols.py          Embedder, Reranker, LanguageModel; ChatMessage, LLMResult
    embedding.py          memory-type prefixes (plan §2.1), embed_memories()
    embed_gemini.py       gemini-embedding-001          embed_wordllama.py   offline, 256-d padded
    rerank_flashrank.py   FlashRank from a local folder  rerank_skipped.py    no model: stage skipped
    llm.py                ResilientLanguageModel over a backend: llm_gemini, llm_anthropic,
                          llm_openai_compat; llm_reflex.py when no model is configured
    resilience.py         timeouts, retries with jitter, circuit breakers
    *_errors.py           SDK exceptions -> src.errors, one module per SDK
    costs.py              llm_calls ledger, /cost table, system-prompt summary line
    selection.py          which provider per role and why (describe_providers)
    factory.py            build_providers() -> Providers

Import from the submodules; this package imports nothing so light modules stay light.
"""
