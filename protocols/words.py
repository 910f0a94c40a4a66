"""Word sources: where a sampler that uses a variable number of random 64-bit words per value
takes them from (the exact discrete Laplace sampler, ``protocols.mechanisms.dlap``).

A sampler works on a block of values, ``rows`` x ``columns``; each value (row i, column j) is a
*stream* that reads its words in order, word 0, 1, 2, ... A source gives the words of many
streams at once::

    source.words(rows, cols, start, width)  # shape (len(rows), width): words start ..
                                            # start + width - 1 of stream (rows[s], cols[s])

A sampler asks for each word of a stream at most once per draw, in order (it may ask for a
stream's next words after its first ones), so a source may hand out fresh words on every call.

* ``AgentWords`` -- the agents' own coins (local noise): stream (i, j) is a region of agent
  ``agents[i]``'s counter-based stream in round ``rnd`` (``protocols.rng.bits_at``), so a value's
  words, and the value, depend only on that agent, never on the rest of the block or its order.
* ``GeneratorWords`` -- one party's sequential ``numpy.random.Generator`` (central noise): raw
  64-bit outputs of its bit generator, in the order asked; deterministic given the generator's
  state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from ldpsim.protocols import rng as rngm

#: First draw index of the regions of the agents' streams that hold Laplace words: far above
#: the small offsets protocols use for their uniforms (``Block.uniforms``), and below 2^32 (the
#: draw index is the low 32 bits of a round's counter, ``protocols.rng``)
WORD_BASE = 1 << 31
#: Draw indices per value column: column c's words are WORD_BASE + c REGION + 0 .. REGION - 1
REGION = 1 << 16
#: Columns that fit below 2^32
MAX_COLUMNS = ((1 << 32) - WORD_BASE) // REGION


class WordSource(Protocol):
    """Random 64-bit words for the streams (value row, value column) of a sampler."""

    #: most words one stream may use (the sampler raises beyond; None: no limit)
    limit: int | None

    def words(self, rows: np.ndarray, cols: np.ndarray, start: int, width: int) -> np.ndarray:
        """Words ``start .. start + width - 1`` of streams (rows[s], cols[s]), uint64 of shape
        (len(rows), width)."""
        ...  # pragma: no cover

    def take(self, rows: np.ndarray) -> WordSource:
        """The source whose row i is this one's row ``rows[i]``."""
        ...  # pragma: no cover


@dataclass(frozen=True)
class AgentWords:
    """The agents' words of round ``rnd``: stream (i, j) is agent ``agents[i]``'s draw indices
    ``WORD_BASE + (column + j) REGION + c`` for c = 0 .. REGION - 1.

    Parameters
    ----------
    key : int or ndarray
        What the block holds as the agents' stream key (one, or one per agent), passed to
        ``protocols.rng.bits_at`` as it is.
    agents : ndarray
        Agent ids, one per value row.
    rnd : int
        The round.
    column : int
        The first value column's region (a protocol that releases two blocks of Laplace values
        in one round gives the second its own columns).
    """

    key: Any
    agents: np.ndarray
    rnd: int
    column: int = 0

    @property
    def limit(self) -> int:
        return REGION

    def check_columns(self, count: int) -> None:
        """ValueError unless value columns ``0 .. count - 1`` fit in a round's draw indices."""
        if self.column + count > MAX_COLUMNS:
            raise ValueError(f"Laplace words: column {self.column + count - 1} is beyond the "
                             f"{MAX_COLUMNS} columns of a round's draw indices")

    def words(self, rows: np.ndarray, cols: np.ndarray, start: int, width: int) -> np.ndarray:
        cols = np.asarray(cols, dtype=np.int64)
        if len(cols):
            self.check_columns(int(cols.max()) + 1)
        if start < 0 or start + width > REGION:
            raise ValueError(f"Laplace words {start} .. {start + width - 1} are outside a "
                             f"column's region of {REGION}")
        base = (WORD_BASE + (self.column + cols) * REGION + start).astype(np.uint64)
        idx = base[:, None] + np.arange(width, dtype=np.uint64)
        return rngm.bits_at(_key_rows(self.key, rows), np.asarray(self.agents)[rows], self.rnd,
                            idx)

    def take(self, rows: np.ndarray) -> AgentWords:
        """The agents ``agents[rows]`` (and their keys), the same columns."""
        return AgentWords(_key_rows(self.key, rows), np.asarray(self.agents)[rows], self.rnd,
                          self.column)


def _key_rows(key: Any, rows: np.ndarray) -> Any:
    """The key of each selected row: a per-agent key array is selected with its agents (as
    ``Block.take`` does), one stream key is everyone's."""
    return key[rows] if isinstance(key, np.ndarray) and key.ndim else key


@dataclass(frozen=True)
class GeneratorWords:
    """Words from a party's sequential generator (central noise): each call's words are the
    bit generator's next raw 64-bit outputs, row after row."""

    generator: np.random.Generator
    limit: int | None = REGION

    def words(self, rows: np.ndarray, cols: np.ndarray, start: int, width: int) -> np.ndarray:
        raw = self.generator.bit_generator.random_raw(len(rows) * width)
        return np.asarray(raw, dtype=np.uint64).reshape(len(rows), width)

    def take(self, rows: np.ndarray) -> GeneratorWords:
        """The same generator: its words are the next ones whichever rows ask."""
        return self
