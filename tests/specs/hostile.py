"""Small builders for hostile-input tests: a valid spec text and limits that keep tests quick."""

from __future__ import annotations

import os
import signal

from specrag.core.settings import Settings
from specrag.specs.chunker import SpecChunker
from specrag.specs.limits import SpecLimits

GOOD = """\
openapi: 3.0.0
info: {title: Good, version: "1"}
paths:
  /pets:
    get:
      operationId: listPets
      responses:
        "200": {description: ok, content: {application/json: {schema: {$ref: "#/components/schemas/Pet"}}}}
components:
  schemas:
    Pet: {type: object, properties: {name: {type: string}}}
"""


def spec(extra: str = "", paths: str = "  /a:\n    get:\n      responses: {'200': {description: ok}}\n") -> str:
    """A minimal OpenAPI 3.0 YAML spec; ``extra`` is appended at the top level."""
    return f"openapi: 3.0.0\ninfo: {{title: T, version: '1'}}\npaths:\n{paths}{extra}"


def limits(**changes) -> SpecLimits:
    """The default limits with ``changes`` applied."""
    return SpecLimits.from_settings(Settings()).model_copy(update=changes)


def billion_laughs(levels: int = 9) -> str:
    """The classic alias bomb (10**levels strings from ~1 KB), used by an operation's example."""
    lines = ["x-lol:", '  l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    paths = ("  /a:\n    get:\n      responses:\n        '200':\n          description: ok\n"
             f"          content: {{application/json: {{example: *l{levels}}}}}\n")
    return "\n".join(lines) + "\n" + spec(paths=paths)


class DyingChunker(SpecChunker):
    """Kills its worker process on the spec whose file_id is ``crash`` (patch it into ``ingest``)."""

    def run(self):
        if self.file_id == "crash":
            os.kill(os.getpid(), signal.SIGKILL)
        return super().run()
