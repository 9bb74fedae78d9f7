"""Layer 2: datasets. Reading files (JSON lines, JSON, CSV, Parquet), mapping columns to the canonical fields,
checking rows, conversations, and the Azure AI Evaluation SDK's data formats. Imports only ``core``."""
