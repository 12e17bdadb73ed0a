"""The Kafka runtime: the processors on a Kafka broker, state in faust Tables.

``runtime`` is the worker (its batches and lifecycle), ``routes`` how each input reaches a
processor's merge, ``ordering`` the ordering rule's completeness knowledge on Kafka, ``markers`` the
progress markers workers send each other, ``sends`` the record batches, ``positions`` each route's
read positions, ``broker`` topics and the commands' clients, ``roles`` and ``acls`` access control.
``streams/`` only builds the faust app around it.
"""
