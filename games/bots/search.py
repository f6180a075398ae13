"""A scripted player for every seat of Search Self-Play.

- proposer: picks a fact of the corpus at random (seeded), searches its subject's name, then
  proposes the fact's question with its answer;
- validator: reads the answer out of the documents it was shown;
- solver: searches the question once, then reads the answer out of its results.

Reading is :func:`games.search.corpus.read_answer`: the question's wording names a relation
and a subject, and the first shown document that states that relation of that subject gives
the answer; ``Unknown`` when none does. The validator and the solver read only what their seat
was shown (the question and their documents), never the proposer's answer.
"""

from __future__ import annotations

from games.bots.base import Bot, unsupported
from games.formats import QUESTION_ANSWER
from games.search.corpus import Fact, read_answer
from games.search.game import PROPOSER, SOLVER, SearchSelfPlay
from games.text_env import TextGame
from games.tools import call_json

UNKNOWN = "Unknown"


class SearchBot(Bot):
    """Proposes a corpus fact it looked up; answers by reading the documents it was shown."""

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self.fact: Fact | None = None

    def act(self, env: TextGame, agent: str) -> str:
        if not isinstance(env, SearchSelfPlay):
            raise unsupported(self, env, "Search Self-Play")
        if agent == PROPOSER:
            return self._propose(env)
        assert env.question is not None, "only the proposer moves before the question"
        if agent == SOLVER and env.searches[SOLVER] == 0 and env.searches_left(SOLVER) > 0:
            return call_json("search", query=env.question)
        return read_answer(env.question, env.seen_docs(agent)) or UNKNOWN

    def _propose(self, env: SearchSelfPlay) -> str:
        if env.searches[PROPOSER] == 0:
            facts = env.corpus.facts
            self.fact = facts[int(self.rng.integers(len(facts)))]
            if env.searches_left(PROPOSER) > 0:
                return call_json("search", query=self.fact.subject)
        assert self.fact is not None
        question = env.corpus.question_for(self.fact)
        return QUESTION_ANSWER.wrap({"question": question.text, "answer": question.answer})
