"""A pytest plugin for scripts/helion140_check.sh: Helion's device checks answer as the H200's do
(``costmodel.helion.target.answer_as``: a CPU has no tensor descriptors, and Helion 1.4.0 then offers block_ptr
indexing in their place; nor maxnreg, which shifts every later draw of the random population: not the H200's space)."""

from costmodel.hardware import KNOWN
from costmodel.helion.target import answer_as

answer_as(KNOWN["nvidia-h200"])
