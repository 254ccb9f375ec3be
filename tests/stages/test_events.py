"""specrag's own instrumentation events are built only when a handler listens."""

from __future__ import annotations

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import NullEventHandler
from specrag.core.records import ApiSelection
from specrag.stages.events import StageEndEvent, dispatcher, emit, listened

SELECTION = ApiSelection(selected_apis=["petstore"])


def test_an_event_is_built_and_sent_only_when_a_handler_listens(record_events, monkeypatch):
    # the dispatchers as a fresh process has them (a server test may have installed its observers)
    monkeypatch.setattr(get_dispatcher(), "event_handlers", [NullEventHandler()])
    monkeypatch.setattr(dispatcher, "event_handlers", [])
    built = []

    def make():
        built.append(1)
        return StageEndEvent(stage="select", result=SELECTION)

    assert not listened()  # LlamaIndex's null handler alone
    emit(make)
    assert built == []
    with record_events() as recorder:
        assert listened()
        emit(make)
    assert built == [1] and [(e.stage, e.result) for e in recorder.events] == [("select", SELECTION)]
    assert not listened()
