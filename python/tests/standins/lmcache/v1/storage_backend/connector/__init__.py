"""Stand-in of LMCache's connector registry types."""
from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class ConnectorContext:
    url: str
    loop: Any
    local_cpu_backend: Any
    config: Optional[Any] = None


class ConnectorAdapter:
    def __init__(self, schema: str):
        self.schema = schema

    def can_parse(self, url: str) -> bool:
        raise NotImplementedError

    def create_connector(self, context: ConnectorContext):
        raise NotImplementedError
