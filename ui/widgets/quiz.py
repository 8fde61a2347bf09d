"""Predict, then reveal: a page's questions, asked about the numbers on screen, with a score.

A page's own `questions.ask_questions` calls `ask` with what it has just computed; the questions
come from `attention_core.lessons.quiz`. A learner chooses, locks the
prediction in, and only then sees whether it was right and why. In presenter mode the room sees
the question and its options first, and the presenter reveals the answer with a button.

A teacher's link opens a chosen set: `?quiz=sdpa.winner,sdpa.noscale` (through PageState, so
a bad id is named in a notice and the others still open). Session keys: `quiz.answers`
(the score), `quiz.<id>.locked` / `quiz.<id>.revealed` (the question as it was answered).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping

import streamlit as st

from attention_core import AttentionInputError
from attention_core.lessons.quiz import QUESTIONS, Question, parse_question_ids
from server import room_store, rooms
from server.rooms import RoomError
from ui.pages import PAGES
from ui.widgets import room as room_widget
from ui.widgets.room import Room
from ui.widgets.state import PageState, is_presenting, write_url_after_fragment

SCORE_KEY = "quiz.answers"  # {(question id, prompt, explanation): right?}, one entry a question
# A question's buttons, by the action that ends their key `quiz.<id>.<action>`: (label, icon).
BUTTONS = {
    "lock": ("Lock in my prediction", ":material/lock:"),
    "again": ("Predict again", ":material/replay:"),
    "reveal": ("Reveal the answer", ":material/visibility:"),
    "hide": ("Hide the answer", ":material/visibility_off:"),
    "ask": ("Ask the room again", ":material/replay:"),
}


def ask(view: PageState, page: str, builders: Mapping[str, Callable[[], Question]]) -> None:
    """The "Predict, then reveal" section: the questions of `page` (their ids' prefix, the
    page record's `quiz`) the link chose, or all of them.

    `builders` makes each question from the page's current numbers; one that cannot be asked of
    these numbers (an AttentionInputError) says why instead.
    """
    asked_on = {record.quiz: f"the “{record.title}” page" for record in PAGES if record.quiz}
    chosen_key = view.ids_key(
        "quiz", list(builders), lambda raw: parse_question_ids(raw, page, asked_on)
    )
    opened = bool(st.session_state[chosen_key]) or is_presenting()
    with st.expander("Predict, then reveal", icon=":material/quiz:", expanded=opened):
        _questions(view, builders, chosen_key)


@st.fragment
def _questions(
    view: PageState, builders: Mapping[str, Callable[[], Question]], chosen_key: str
) -> None:
    presenting, room = is_presenting(), room_widget.current()
    room_widget.redraw_if_started()
    if presenting and room is None:
        room_widget.start_button("room.start.quiz")
    if room is not None and not room.speaker:
        st.markdown(
            f"Commit to a prediction: it goes to room {room.shown}, without your name, and the "
            "answer shows when the speaker reveals it."
        )
    elif not presenting:
        st.markdown(
            "Commit to a prediction, then see the answer, computed from the numbers on this "
            "page right now. " + score_text()
        )
    for number, qid in enumerate(st.session_state[chosen_key] or list(builders), start=1):
        try:
            question = builders[qid]()
        except AttentionInputError as error:
            st.info(
                f"**{number}. {QUESTIONS[qid]}** Not with these numbers: {error}",
                icon=":material/info:",
            )
            continue
        if room is not None and room.speaker:
            _present(question, number, room)
        elif room is not None:
            _predict_in_room(question, number, room)
        else:
            (_present if presenting else _predict)(question, number)
    if not presenting and room is None:  # a class link is a teacher's tool, not a room's
        _link_tools(builders, chosen_key)
    write_url_after_fragment(view)


def score_text() -> str:
    answers = st.session_state.get(SCORE_KEY, {})
    if not answers:
        return "Your score this session: no predictions yet."
    right = sum(answers.values())
    return f"Your score this session: **{right} of {len(answers)}** predictions right."


def _digest(question: Question) -> str:
    """Names the widgets of one version of a question: new numbers, new options, fresh widgets."""
    text = "\n".join((question.prompt, *question.options))
    return hashlib.sha1(text.encode()).hexdigest()[:10]


def _lock(question: Question, choice_key: str) -> None:
    chosen = st.session_state.get(choice_key)
    st.session_state[f"quiz.{question.id}.locked"] = (question, chosen)
    if not question.pending:
        _score(question, chosen)


def _score(question: Question, chosen) -> None:
    # One entry per question and numbers: locking the same question in again does not count twice.
    answers = st.session_state.setdefault(SCORE_KEY, {})
    answers.setdefault(
        (question.id, question.prompt, question.explanation), question.is_right(chosen)
    )


def _locked_for(locked: Question, question: Question) -> bool:
    """Whether a prediction locked in for `locked` answers `question`: the same question, or the
    same prompt and options asked before their answer was known (a training that had not
    ended then)."""
    return locked == question or (
        locked.pending and (locked.id, locked.prompt, locked.options) == (
            question.id, question.prompt, question.options
        )
    )  # fmt: skip


def _unlock(question: Question, choice_key: str) -> None:
    st.session_state.pop(f"quiz.{question.id}.locked", None)
    st.session_state.pop(choice_key, None)


def _button(question: Question, action: str, on_click, args: tuple, **more) -> None:
    """The `BUTTONS[action]` button of `question`: one place for the keys tests and the session
    know them by."""
    label, icon = BUTTONS[action]
    key = f"quiz.{question.id}.{action}"
    st.button(label, key=key, icon=icon, on_click=on_click, args=args, **more)


def _chosen_text(question: Question, chosen) -> str:
    picked = sorted(chosen) if question.multiple else [chosen]
    return "; ".join(question.options[i] for i in picked)


def _choice_key(question: Question) -> str:
    return f"quiz.{question.id}.choice.{_digest(question)}"


def _predict(question: Question, number: int, *, on_lock=_lock, room: Room | None = None) -> None:
    choice_key = _choice_key(question)
    locked = st.session_state.get(f"quiz.{question.id}.locked")
    if locked is None or not _locked_for(locked[0], question):
        label = f"{number}. {question.prompt}"
        choose = {"format_func": question.options.__getitem__, "key": choice_key}
        if question.multiple:
            chosen = st.pills(label, range(len(question.options)), selection_mode="multi", **choose)
        else:
            chosen = st.radio(label, range(len(question.options)), index=None, **choose)
        _button(
            question,
            "lock",
            on_lock,
            (question, choice_key) if room is None else (question, choice_key, room),
            disabled=chosen is None or (question.multiple and not chosen),
            help="The answer shows once you have committed to a prediction."
            if room is None
            else "Your prediction goes to the room; the answer shows when the speaker reveals it.",
        )
        return
    # Locked in: the question as text (a disabled control would read faintly), then the verdict.
    st.markdown(f"**{number}.** {question.prompt}")
    chosen = locked[1]
    if question.pending:
        st.info(
            f"Locked in: {_chosen_text(question, chosen)}. The answer shows when the training "
            "ends.",
            icon=":material/lock:",
        )
        _button(question, "again", _unlock, (question, choice_key))
        return
    _verdict(question, chosen)
    _button(question, "again", _unlock, (question, choice_key))


def _verdict(question: Question, chosen) -> None:
    """Whether the locked-in prediction was right, and why: it counts in the session's score."""
    _score(question, chosen)
    if question.is_right(chosen):
        st.success(f"Right: {question.answer}.", icon=":material/check_circle:")
    else:
        st.error(
            f"Not this time. You predicted {_chosen_text(question, chosen)}; the answer is "
            f"{question.answer}.",
            icon=":material/cancel:",
        )
    st.markdown(question.explanation)


def _present(question: Question, number: int, room: Room | None = None) -> None:
    """For the room: the question and its options first, the answer on the presenter's click
    (in a talk's room, the room's count first, then its answers)."""
    base = f"quiz.{question.id}"
    revealed = st.session_state.get(f"{base}.revealed") == question
    letters = [chr(ord("A") + i) for i in range(len(question.options))]
    st.markdown(f"**{number}.** {question.prompt}")
    # A list, one option a line, each with the letter the room calls out.
    st.markdown(
        "\n".join(
            f"- **{letter}.** {option}"
            for letter, option in zip(letters, question.options, strict=True)
        )
    )
    if room is not None:
        refreshing = st.fragment(run_every=room_widget.SPEAKER_REFRESH_S)
        refreshing(_room_count)(question, room)
        return
    if question.pending:
        st.caption("The answer shows when the training ends.")
        return
    if not revealed:
        _button(question, "reveal", st.session_state.__setitem__, (f"{base}.revealed", question))
        return
    right = ", ".join(f"{letters[i]}. {question.options[i]}" for i in sorted(question.correct))
    st.success(f"Answer: {right}", icon=":material/check_circle:")
    st.markdown(question.explanation)
    _button(question, "hide", st.session_state.pop, (f"{base}.revealed", None))


# -- in a talk's room ----------------------------------------------------------------------------


def _room_question(question: Question) -> str:
    return rooms.question_key(question.id, _digest(question))


def _room_count(question: Question, room: Room) -> None:
    """The speaker's view of one question in the room, read from the store every second: the
    number of answers, then, once revealed, the answer and the room's spread."""
    key = _room_question(question)
    read = room_widget.read_question(room, key)
    if read is None:
        return
    tally, _ = read
    if not tally.revealed:
        st.markdown(f"**{_answers(tally.answers)} so far**")
        if question.pending:
            st.caption("The answer shows when the training ends.")
            return
        _button(question, "reveal", _speaker_acts, (rooms.reveal, room, key))
        return
    st.success(f"Answer: {_lettered(question)}", icon=":material/check_circle:")
    st.markdown(question.explanation)
    room_widget.show_answers(
        question.options, tally, question.correct, key=f"quiz.{question.id}.room"
    )
    _button(question, "ask", _speaker_acts, (rooms.ask_again, room, key))


def _speaker_acts(act, room: Room, key: str) -> None:
    try:
        act(room_widget.store(), room.code, room.secret, key, room_store.now())
    except RoomError as error:
        room_widget.gone(str(error))


def _predict_in_room(question: Question, number: int, room: Room) -> None:
    refreshing = st.fragment(run_every=room_widget.AUDIENCE_REFRESH_S)
    refreshing(_room_prediction)(question, number, room)


def _room_prediction(question: Question, number: int, room: Room) -> None:
    """An audience member's question in the room: predict and lock in as anywhere (the answer
    goes to the room), then wait for the speaker's reveal, read from the store every 2 s."""
    base = f"quiz.{question.id}"
    key = _room_question(question)
    read = room_widget.read_question(room, key, room_widget.viewer())
    if read is None:
        return
    tally, mine = read
    locked = st.session_state.get(f"{base}.locked")
    sent = st.session_state.get(f"{base}.sent") == key
    if locked is not None and sent and mine is None and not tally.revealed:
        _unlock(question, _choice_key(question))  # the speaker asks it again
        st.session_state.pop(f"{base}.sent", None)
        st.info("The speaker asks this question again: predict anew.", icon=":material/replay:")
        locked = None
    if not tally.revealed and (locked is None or not _locked_for(locked[0], question)):
        _predict(question, number, on_lock=_lock_in_room, room=room)
        return
    st.markdown(f"**{number}.** {question.prompt}")
    if not tally.revealed:
        st.info(
            f"Locked in: {_chosen_text(question, locked[1])}. It is in room {room.shown}; "
            "the answer shows when the speaker reveals it.",
            icon=":material/lock:",
        )
        outcome = st.session_state.get(f"{base}.outcome", room_store.ANSWERED)
        if outcome != room_store.ANSWERED:
            st.warning(rooms.OUTCOMES.get(outcome, outcome), icon=":material/block:")
        _button(
            question,
            "again",
            _unlock,
            (question, _choice_key(question)),
            help="Your new prediction replaces this one.",
        )
        return
    if locked is not None and _locked_for(locked[0], question) and sent:
        _verdict(question, locked[1])
    else:
        st.info(
            f"The speaker revealed this one before your prediction reached the room: the "
            f"answer is {question.answer}.",
            icon=":material/visibility:",
        )
        st.markdown(question.explanation)
    room_widget.show_answers(question.options, tally, question.correct, key=f"{base}.room")


def _lock_in_room(question: Question, choice_key: str, room: Room) -> None:
    """Lock a prediction in and send it to the room; it is judged once the speaker reveals."""
    chosen = st.session_state.get(choice_key)
    base = f"quiz.{question.id}"
    st.session_state[f"{base}.locked"] = (question, chosen)
    key = _room_question(question)
    try:
        outcome = rooms.answer(
            room_widget.store(), room.code, key, room_widget.viewer(), chosen,
            options=len(question.options), multiple=question.multiple, now=room_store.now(),
        )  # fmt: skip
    except RoomError as error:  # not an answer the question has: said as it is
        outcome = str(error)
    st.session_state[f"{base}.outcome"] = outcome
    st.session_state[f"{base}.sent"] = key if outcome == room_store.ANSWERED else None


def _answers(count: int) -> str:
    return f"{count} answer" + ("" if count == 1 else "s")


def _lettered(question: Question) -> str:
    return ", ".join(
        f"{chr(ord('A') + i)}. {question.options[i]}" for i in sorted(question.correct)
    )


def _link_tools(builders: Mapping[str, Callable[[], Question]], chosen_key: str) -> None:
    """For a teacher: choose the questions a class link opens."""
    st.multiselect(
        "Questions for a class link (none chosen: all of this page's)",
        list(builders),
        format_func=lambda qid: f"{qid}: {QUESTIONS[qid]}",
        key=chosen_key,
        placeholder="All of this page's questions",
    )
    chosen = st.session_state[chosen_key]
    if chosen:
        page_url = (st.context.url or "").split("?")[0]
        st.markdown(
            "The address bar now opens just these questions, with the numbers on this page "
            "(**Copy link to this view** in the sidebar copies it). This link opens them with "
            "the page's first numbers; add `&present=1` for a projector:"
        )
        st.code(f"{page_url}?quiz={','.join(chosen)}", language=None, wrap_lines=True)


# -- one call per page ----------------------------------------------------------------------------
