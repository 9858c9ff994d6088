"""Vector backends behind one trait (seed 001 "Vector Backend Trait" to "Backend Circuit
Breaker"): configuration, registry, operations (breaker, metrics, health) and the adapters
for Qdrant, Weaviate, Pinecone, MongoDB Atlas, Vertex AI and Databricks. pgvector, which
works on the memories table, is registered by the ``memories`` app."""
