"""Reports over the DuckDB views: pages and terminal summaries, every event string escaped."""
