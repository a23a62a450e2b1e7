FROM python:3.11-slim

WORKDIR /app
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1

COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install .

# The reranker's model is fetched once, at build time, into the cache_dir that
# runtime.yaml names; at run time nothing is ever downloaded.
RUN python -c "from flashrank import Ranker; Ranker(model_name='ms-marco-MiniLM-L-12-v2', cache_dir='/app/data/models/flashrank')"

COPY sql ./sql
COPY runtime.yaml notes.md ./

CMD ["python", "-m", "src.main"]
