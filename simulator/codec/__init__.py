"""The wire format: the reference msgpack codec (``wire``), the batch codecs that write and read
many agents' envelopes at once (``wire_numpy``, ``wire_numpy_read``) and the optional compiled
one (``_wirec``) they choose between (``compiled``)."""
