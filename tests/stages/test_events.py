"""specrag's own instrumentation events are built only when a handler listens."""

from __future__ import annotations

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler

from pipeline.stages.events import StageEndEvent, emit, listened


class Recorder(BaseEventHandler):
    seen: list = []

    @classmethod
    def class_name(cls) -> str:
        return "Recorder"

    def handle(self, event, **kwargs) -> None:
        self.seen.append(event)


def test_an_event_is_built_and_sent_only_when_a_handler_listens():
    built = []

    def make():
        built.append(1)
        return StageEndEvent(stage="select", result="r")

    assert not listened()  # LlamaIndex's null handler alone
    emit(make)
    assert built == []
    recorder = Recorder(seen=[])
    root = get_dispatcher()
    root.add_event_handler(recorder)
    try:
        assert listened()
        emit(make)
    finally:
        root.event_handlers.remove(recorder)
    assert built == [1] and [(e.stage, e.result) for e in recorder.seen] == [("select", "r")]
    assert not listened()
