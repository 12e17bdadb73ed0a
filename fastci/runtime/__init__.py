"""Runtimes move events between topics and processors; they hold no logic of their own."""
