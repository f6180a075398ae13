"""Search Self-Play.

Seats: proposer, validator, solver. The proposer moves first, then the validator, then the
solver.

A corpus holds one short document per invented entity (people, cities, countries, companies,
rivers), stating facts such as where a person was born or who founded a company. The search
tool returns the documents that best match a query (keyword search):
<tool_call>{"name": "search", "arguments": {"query": "Velmora Tashkin"}}</tool_call>
Only the seat that searched sees its results. Each search uses up a turn.

1. proposer: search the corpus (a few times at most), then write a question and its answer:
   <question>In which city was Velmora Tashkin born?</question><answer>Karvos</answer>
   The answer must be stated in a document you found. Aim for a question the solver fails.
2. validator: you see the question and some documents: the ones the proposer found, mixed with
   a few others. Answer from those documents only, in \\boxed{}. The proposal is valid when your
   answer matches the proposer's.
3. solver (only for a valid proposal): you see the question only. Search (a few times at most),
   then answer in \\boxed{}.

An answer is a short name or year: 1 to 5 words. Answers match when they agree apart from case,
spacing, punctuation and a leading "the". A question that contains its own answer is invalid at
once (no one else plays); so is one the validator answers differently (the solver does not play).

Rewards: solver 1 for a correct answer, else 0. Proposer: 1 when the solver fails a valid
question, 0 when it solves it, minus the invalid penalty for an invalid proposal. Validator: its
agreement reward when it matches the proposer (0 unless stated below).

Invalid output (feedback, another try, then a forfeit): a reply that is neither a tool call nor
the seat's final format, an empty question, an answer longer than 5 words or without a letter or
digit, a search when none are left, and any search by the validator. A tool call with the wrong
tool name or arguments is played: it uses up a search and returns an error.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import networkx as nx
import numpy as np
from gymnasium import spaces

from games.formats import QUESTION_ANSWER
from games.search.answers import (
    ACTION_MAX_CHARS,
    SEARCH_OR_BOXED,
    SEARCH_OR_QUESTION,
    answer_key,
    contains_answer,
    read_action,
)
from games.search.corpus import DEFAULT_ENTITIES, Corpus, Doc, build_corpus, read_answer
from games.search.retrieval import Retriever, format_results
from games.text import CHARSET
from games.text_env import TextGame
from games.tools import Tool, Toolbox, call_json

PROPOSER, VALIDATOR, SOLVER = "proposer", "validator", "solver"
RETRIEVER = "retriever"
"""The non-seat node that posts the validator's documents."""
PHASES = ("propose", "validate", "solve", "over")


@functools.lru_cache(maxsize=4)
def library(corpus_seed: int, n_entities: int) -> tuple[Corpus, Retriever]:
    """The corpus of ``corpus_seed`` and its index, built once per process."""
    corpus = build_corpus(corpus_seed, n_entities)
    return corpus, Retriever(corpus.docs)


class SearchSelfPlay(TextGame):
    """SSP: a proposer writes a question from what it searched, a validator checks it against
    the proposer's documents (RAG), and a solver searches to answer it.

    ``corpus_seed``/``n_entities`` fix the corpus (the same in every episode); ``max_searches``
    per searching seat, ``k`` documents per search, ``distractors`` extra documents for the
    validator; ``invalid_penalty`` (the proposer's loss for an invalid proposal) and
    ``validator_reward`` (paid when the validator matches the proposer). The turn limit is
    ``2 * max_searches + 3``, which a game never reaches.

    Interaction graph: proposer -> validator and proposer -> solver carry ``question``;
    ``retriever`` -> validator carries ``documents``. Each seat posts its own ``tool_call`` and
    ``tool_result`` (so it alone sees its search results) and its ``answer``; validator and
    solver ``never_see`` answers, so the proposer's answer reaches neither.

    Infos (every seat, every step): ``proposal_valid`` and ``solver_correct`` (None until
    known), ``proposer_searches`` and ``solver_searches``; ``tool_error`` on a turn whose search
    failed or found nothing; when the game ends, ``metrics`` (see :meth:`metrics`: what role
    evaluation reports).
    """

    metadata = {
        **TextGame.metadata,
        "name": "search_selfplay_v0",
        "seats": (3, 3),
        "kind": "general-sum",
        "information": "hidden",
        "max_turns": 9,
        "strongest_bot": "search-scripted-v0",
        "pass_metrics": ("valid", "validator_accuracy", "solver_accuracy"),
    }

    def __init__(
        self,
        corpus_seed: int = 0,
        n_entities: int = DEFAULT_ENTITIES,
        max_searches: int = 3,
        k: int = 3,
        distractors: int = 2,
        invalid_penalty: float = 1.0,
        validator_reward: float = 0.0,
        **kwargs: Any,
    ) -> None:
        if max_searches < 0 or k < 1 or distractors < 0:
            raise ValueError("need max_searches >= 0, k >= 1 and distractors >= 0")
        self.corpus, self.retriever = library(int(corpus_seed), int(n_entities))
        self.max_searches, self.k, self.distractors = int(max_searches), int(k), int(distractors)
        self.invalid_penalty, self.validator_reward = (
            float(invalid_penalty),
            float(validator_reward),
        )
        self.tools = Toolbox(
            [
                Tool(
                    "search",
                    "Search the corpus; the best documents, best first.",
                    {"query": str},
                    self._search,
                )
            ]
        )
        box = spaces.Box(0.0, 1.0, (3,), np.float32)
        action_space = spaces.Text(ACTION_MAX_CHARS, min_length=1, charset=CHARSET)
        kwargs.setdefault("max_turns", 2 * self.max_searches + 3)
        super().__init__(3, action_space, box, agents=[PROPOSER, VALIDATOR, SOLVER], **kwargs)

    # -- who sees what ---------------------------------------------------------------------------
    def interaction_graph(self) -> nx.DiGraph:
        graph = nx.DiGraph()
        graph.add_node(
            PROPOSER,
            role="proposer-v0",
            role_kwargs={"output": SEARCH_OR_QUESTION, "what": "your question and its answer"},
        )
        answer = "your final answer alone (a name or a year)"
        graph.add_node(
            VALIDATOR,
            role="solver-v0",
            role_kwargs={
                "job": "You are {seat}, the validator: answer the question from the documents "
                "you are shown, and from nothing else.",
                "what": answer,
            },
            never_sees=frozenset({"answer"}),
        )
        graph.add_node(
            SOLVER,
            role="solver-v0",
            role_kwargs={"output": SEARCH_OR_BOXED, "what": answer},
            never_sees=frozenset({"answer"}),
        )
        graph.add_node(RETRIEVER)
        graph.add_edge(PROPOSER, VALIDATOR, sees=frozenset({"question"}))
        graph.add_edge(PROPOSER, SOLVER, sees=frozenset({"question"}))
        graph.add_edge(RETRIEVER, VALIDATOR, sees=frozenset({"documents"}))
        return graph

    def rules(self, agent: str | None = None) -> str:
        settings = (
            f"This game: at most {self.max_searches} searches per seat, {self.k} documents per "
            f"search, {self.distractors} extra documents for the validator; invalid penalty "
            f"{self.invalid_penalty:g}; validator agreement reward {self.validator_reward:g}."
        )
        return f"{super().rules(agent)}\n\n{settings}"

    def seen_docs(self, agent: str) -> list[Doc]:
        """The documents ``agent`` has been shown: its search results, or the validator's set."""
        return list(self.context if agent == VALIDATOR else self.found[agent])

    # -- the game --------------------------------------------------------------------------------
    def _new_game(self, rng: np.random.Generator) -> None:
        self.phase = "propose"
        self.searches = {PROPOSER: 0, SOLVER: 0}
        self.found: dict[str, list[Doc]] = {PROPOSER: [], VALIDATOR: [], SOLVER: []}
        self.context: list[Doc] = []
        self.question: str | None = None
        self.answer: str | None = None
        self.proposal_valid: bool | None = None
        self.solver_correct: bool | None = None
        self.example = self.corpus.questions(rng, 1)[0]  # the sample actions' topic
        self._last_docs: list[Doc] = []  # what the search tool found last
        self._update_infos()

    def _current_agent(self) -> str:
        # once the game is over the seat to move no longer matters; keep the last one
        seats = {"propose": PROPOSER, "validate": VALIDATOR, "solve": SOLVER}
        return seats.get(self.phase, PROPOSER)

    def searches_left(self, agent: str) -> int:
        return self.max_searches - self.searches[agent] if agent in self.searches else 0

    def _legal_actions(self, agent: str) -> list[str]:
        ex = self.example
        query = ex.subject if agent == PROPOSER else self.corpus.spell(ex.text)
        search = [call_json("search", query=query)] if self.searches_left(agent) else []
        if agent == PROPOSER:
            proposal = QUESTION_ANSWER.wrap({"question": ex.text, "answer": ex.answer})
            return [*search, proposal]
        return [*search, ex.answer, "Unknown"]

    def _is_legal(self, agent: str, action: str) -> bool:
        return not self._is_search(action) or self.searches_left(agent) > 0

    def _why_illegal(self, agent: str, action: str) -> str:
        if agent == VALIDATOR:
            return "the validator cannot search: answer from the documents you were shown"
        return "no searches left: write your final answer"

    @staticmethod
    def _is_search(action: str) -> bool:
        return action.startswith("{")

    # -- reading actions -------------------------------------------------------------------------
    def parse_action(self, agent: str, text: str) -> str | None:
        """The canonical action (:func:`~games.search.answers.read_action`, spelled by
        :meth:`Corpus.spell`), or None when the text is malformed."""
        return read_action(text, self.corpus.spell, proposer=agent == PROPOSER)

    # -- playing ---------------------------------------------------------------------------------
    def _search(self, query: str) -> str:
        docs = self.retriever.search(query, self.k)
        self._last_docs = docs
        return format_results(docs)

    def _apply(self, agent: str, action: str) -> Mapping[str, float]:
        self.infos[agent].pop("tool_error", None)
        if self._is_search(action):
            rewards = self._apply_search(agent, action)
        elif agent == PROPOSER:
            rewards = self._apply_proposal(action)
        else:
            rewards = self._apply_answer(agent, action)
        self._update_infos()
        return rewards

    def _apply_search(self, agent: str, action: str) -> Mapping[str, float]:
        self.searches[agent] += 1
        self._last_docs = []
        result = self.tools.call(action)
        self._post(agent, "tool_call", action)
        self._post(agent, "tool_result", result.text)
        if not result.ok:
            self.infos[agent]["tool_error"] = result.error
        elif not self._last_docs:
            self.infos[agent]["tool_error"] = "no document matched the query"
        seen = self.found[agent]
        seen += [d for d in self._last_docs if d not in seen]
        return {}

    def _apply_proposal(self, action: str) -> Mapping[str, float]:
        fields = QUESTION_ANSWER.fields(action)
        assert fields is not None  # parse_action made it
        self.question, self.answer = fields["question"], fields["answer"]
        self._post(PROPOSER, "question", self.question)
        self._post(PROPOSER, "answer", self.answer)
        if contains_answer(self.question, self.answer):
            return self._invalid()
        retrieved = self.found[PROPOSER]
        others = [d for d in self.corpus.docs if d not in retrieved]
        picks = self._rng.choice(
            len(others), size=min(self.distractors, len(others)), replace=False
        )
        context = retrieved + [others[int(i)] for i in picks]
        self.context = [context[int(i)] for i in self._rng.permutation(len(context))]
        self._post(RETRIEVER, "documents", self._render_context())
        self.phase = "validate"
        return {}

    def _render_context(self) -> str:
        # "(n)" rather than a search result's "[n]": no search result reads as part of this text
        lines = [f"({i}) {d.title}: {d.text}" for i, d in enumerate(self.context, start=1)]
        return "\n".join(lines) if lines else "No documents."

    def _invalid(self, validator: float = 0.0) -> Mapping[str, float]:
        self.proposal_valid, self.phase = False, "over"
        rewards = {PROPOSER: -self.invalid_penalty}
        return {**rewards, VALIDATOR: validator} if validator else rewards

    def _apply_answer(self, agent: str, action: str) -> Mapping[str, float]:
        assert self.answer is not None
        self._post(agent, "answer", action)
        agrees = answer_key(action) == answer_key(self.answer)
        if agent == VALIDATOR:
            if not agrees:
                return self._invalid()
            self.proposal_valid, self.phase = True, "solve"
            return {VALIDATOR: self.validator_reward} if self.validator_reward else {}
        self.solver_correct, self.phase = agrees, "over"
        return {SOLVER: float(agrees), PROPOSER: 1.0 - float(agrees)}

    def _update_infos(self) -> None:
        for agent in self.possible_agents:
            self.infos[agent].update(
                proposal_valid=self.proposal_valid,
                solver_correct=self.solver_correct,
                proposer_searches=self.searches[PROPOSER],
                solver_searches=self.searches[SOLVER],
            )

    def _outcome(self) -> str | None:
        return "done" if self.phase == "over" else None

    def _finish(self, reason: str, truncated: bool = False) -> None:
        super()._finish(reason, truncated)
        for agent, metrics in self.metrics().items():
            self.infos[agent]["metrics"] = metrics

    def truth(self) -> str | None:
        """The corpus's answer to the question (None when it is not in the corpus's wording or
        asks about no document)."""
        return read_answer(self.question, self.corpus.docs) if self.question else None

    def metrics(self) -> dict[str, dict[str, float]]:
        """Each seat's headline numbers, for the seats that played: the proposer's ``valid``
        and, for a valid question, ``solver_failed``; the validator's ``validator_accuracy``
        (its answer against the corpus's, when the question has one); the solver's
        ``solver_accuracy``. A seat that forfeited scores 0."""
        out: dict[str, dict[str, float]] = {PROPOSER: {"valid": float(bool(self.proposal_valid))}}
        if self.proposal_valid:
            out[PROPOSER]["solver_failed"] = float(not self.solver_correct)
        truth = self.truth()
        validated = [p.text for p in self.posts if p.sender == VALIDATOR and p.field == "answer"]
        if truth is not None and (validated or self.infos[VALIDATOR]["forfeit"]):
            right = bool(validated) and answer_key(validated[0]) == answer_key(truth)
            out[VALIDATOR] = {"validator_accuracy": float(right)}
        if self.proposal_valid:
            out[SOLVER] = {"solver_accuracy": float(bool(self.solver_correct))}
        return out

    # -- what each seat reads --------------------------------------------------------------------
    def _observation_array(self, agent: str) -> np.ndarray:
        used = self.searches.get(agent, 0)
        scale = max(self.max_searches, 1)
        return np.array(
            [PHASES.index(self.phase) / 3, used / scale, self.searches_left(agent) / scale],
            dtype=np.float32,
        )

    def _describe(self, agent: str) -> str:
        if self.phase == "over":
            return self._summary(agent)
        if agent == PROPOSER:
            if self.phase != "propose":
                return "Your question is in; the validator and the solver play on."
            return (
                f"Searches left: {self.searches_left(agent)} of {self.max_searches}. Search the "
                "corpus, then write a question whose answer a document you found states, and "
                "its answer: <question>...</question><answer>...</answer>."
            )
        if agent == VALIDATOR:
            if self.phase == "propose":
                return "Waiting for the proposer's question."
            if self.phase != "validate":
                return "You have answered; the solver plays on."
            return (
                "Answer the proposer's question above from the documents above only. Put the "
                "answer alone (a name or a year) in \\boxed{}."
            )
        if self.phase != "solve":
            return "Waiting for the proposer's question and its validation."
        return (
            f"Answer the proposer's question above. Searches left: {self.searches_left(agent)} "
            f"of {self.max_searches}. Search, or put the answer alone (a name or a year) in "
            "\\boxed{}."
        )

    def _summary(self, agent: str) -> str:
        if not self.proposal_valid:
            return "The game is over: the proposal was invalid."
        verdict = "solved" if self.solver_correct else "did not solve"
        return f"The game is over: the proposal was valid, and the solver {verdict} it."
