"""The Kafka runtime: a faust-streaming app that runs fastci's processors as agents."""
