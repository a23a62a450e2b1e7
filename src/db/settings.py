"""Settings of the database (runtime.yaml `database:`): pure pydantic.

Here, not in src/config.py, so that `db` sits below everything that composes the settings:
`open_database` is handed this section by its caller and never imports the configuration.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class DatabaseSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # A secret (it may carry a password); filled from DATABASE_URL only.
    url: SecretStr | None = None
    # embedded PostgreSQL, used when DATABASE_URL is unset
    data_dir: Path = Path("./data/pg")
    # Keep the embedded server running after exit: the next start takes milliseconds.
    stop_embedded_on_exit: bool = False
    # The embedded server's shared_buffers: "auto" (a quarter of this machine's memory,
    # 128MB to 2GB), a size ("512MB", "1GB"), or "" to leave the server's own: PostgreSQL's
    # default is too small for a large store (notes.md "Measured"). A change restarts the
    # server once, at the mind's start.
    shared_buffers: str = Field("auto", pattern=r"^(auto|[1-9][0-9]{0,6}(MB|GB)|)$")
    pool_min: int = Field(1, ge=1)
    pool_max: int = Field(8, ge=1)
    connect_timeout_s: float = Field(10.0, gt=0)
    command_timeout_s: float = Field(30.0, gt=0)
