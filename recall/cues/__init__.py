"""What a query says beyond its words: the speakers it names (:mod:`recall.cues.speakers`)
and the time it names (:mod:`recall.cues.times`). The engine searches such a query again
without the names, or within the time, and fuses what it finds with the query as asked. And
whether it asks about the present or the past (:mod:`recall.cues.updates`): for the present,
a newer statement of a rival value goes first."""
