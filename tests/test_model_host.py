"""server.model_host: one load for every session, the idle release and what goes with the model,
the default views prepared after a load. Built on a stand-in read (a model is any object): the
real models go through it in test_default_views.py, test_page_decoder.py and the model pages'
tests."""

from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass

from server import model_host
from server.model_host import ModelHost


class Model:
    pass


@dataclass(frozen=True)
class Loaded:
    model: Model | None
    error: str | None = None


class Cache:
    def __init__(self):
        self.cleared = 0

    def clear(self):
        self.cleared += 1


def counting_read(models: list[Model]):
    def read(progress):
        progress(1, 2)
        model = Model()
        models.append(model)
        progress(2, 2)
        return Loaded(model)

    return read


def test_sessions_asking_at_once_share_one_load_and_a_release_empties_what_went_with_it(
    monkeypatch,
):
    monkeypatch.setenv(model_host.PREPARE_ENV_VAR, "0")
    models: list[Model] = []
    host = ModelHost(counting_read(models), name="test")
    cache = host.holds(Cache())
    threads = [threading.Thread(target=host.start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert host.wait(5)
    assert len(models) == 1 and host.value().model is models[0]
    assert host.progress == (2, 2)
    host.release()
    assert host.value() is None and cache.cleared == 1
    # A viewer still holding the model: the next load may take that copy (the read decides).
    assert host.last_model() is models[0]
    host.forget()
    assert host.last_model() is None and cache.cleared == 2


def test_a_failed_load_is_a_value_saying_why_and_is_read_again_after_forget(monkeypatch):
    monkeypatch.setenv(model_host.PREPARE_ENV_VAR, "0")
    answers = [Loaded(None, "no file"), Loaded(Model())]
    host = ModelHost(lambda progress: answers.pop(0), name="test")
    host.start()
    assert host.wait(5) and host.value().error == "no file"
    assert host.last_model() is None
    host.start()  # a held result, even a failure, is not read again until forgotten
    assert host.value().error == "no file"
    host.forget()
    host.start()
    assert host.wait(5) and host.value().model is not None


def test_the_idle_release_lets_the_model_go_unless_it_is_kept_for_life(monkeypatch):
    monkeypatch.setenv(model_host.PREPARE_ENV_VAR, "0")
    minutes = [1e-6]
    host = ModelHost(counting_read([]), name="test", idle_minutes=lambda: minutes[0])
    host.start()
    assert host.wait(5)
    host.used()
    host.release_if_idle()  # what the timer does once the minutes have passed
    assert host.value() is None
    minutes[0] = 0.0  # 0: kept for the server's life
    host.start()
    assert host.wait(5)
    host.used()
    host.release_if_idle()
    assert host.value() is not None


def test_default_views_are_prepared_after_a_load_unless_the_server_says_not_to(monkeypatch):
    monkeypatch.setattr(model_host, "QUIET_BEFORE_PREPARING_S", 0.01)
    prepared: list[Model] = []
    host = ModelHost(counting_read([]), name="test")
    host.after_load(prepared.append)
    assert host.default_views == (prepared.append,)
    monkeypatch.setenv(model_host.PREPARE_ENV_VAR, "1")
    host.start()
    assert host.wait(5)
    (preparing,) = [t for t in threading.enumerate() if t.name == host.preparing_thread]
    preparing.join(5)
    assert prepared == [host.value().model]
    host.forget()
    monkeypatch.setenv(model_host.PREPARE_ENV_VAR, "0")
    host.start()
    assert host.wait(5)
    assert not [t for t in threading.enumerate() if t.name == host.preparing_thread]
    assert len(prepared) == 1


def test_preparing_stops_with_the_model_and_goes_on_past_a_failure(monkeypatch, caplog):
    prepared = []

    def fails(model):
        raise ValueError("no such text")

    monkeypatch.setattr(model_host, "QUIET_BEFORE_PREPARING_S", 0.05)
    host = ModelHost(counting_read([]), name="test")
    host.after_load(fails)
    host.after_load(prepared.append)
    model = Model()
    with caplog.at_level(logging.ERROR):
        host.prepare_default_views(weakref.ref(model))
    assert prepared == [model]
    assert "no such text" in caplog.text and "fails" in caplog.text
    # The model let go: nothing is prepared, and the wait ends at once.
    prepared.clear()
    host.prepare_default_views(weakref.ref(Model()))
    assert prepared == []
