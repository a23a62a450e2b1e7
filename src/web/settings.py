"""Settings of the guardian's window (the read-only web view); pure, no feature imports."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class WebSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    host: str = "127.0.0.1"
    # 0 picks a free port (tests); the start-up line prints the one bound.
    port: int = Field(8765, ge=0, le=65535)
    # Required when `host` is not a loopback address; only from MOLTBOT_WEB_TOKEN.
    token: SecretStr | None = None
    # Rows per table on a page (every query is bounded by it).
    page_rows: int = Field(100, ge=1, le=2000)
    # How far back the plots over time reach.
    plot_days: int = Field(30, ge=1, le=3650)
