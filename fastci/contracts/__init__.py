"""Event contracts that several capabilities read or write, one module per contract.

A capability's own events stay in its ``events.py``; an event that another capability also reads
or writes lives here, so every capability imports it without reaching into a sibling. These
modules import only ``fastci.core``, ``fastci.inputs`` and each other.
"""
