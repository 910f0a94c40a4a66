"""What runs leave and how it is shown: records, the store, the summary and the per-round
table (``results``), what each column means (``metrics``), the figures (``plots``), the
report page (``report``), a paper's printed numbers beside ours (``published``), the progress
bar (``progress``) and the closest name for an error (``hint``). Nothing else of the runtime
is imported here but the codec."""
