"""Adapters that make other libraries' games Arena text games: OpenSpiel (``openspiel``),
PettingZoo classic (``pettingzoo_classic``) and TextArena (``textarena``). Each imports its
library only when one of its games is built."""
