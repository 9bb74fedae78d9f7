"""Layer 3: the judge. The one client that talks to a model endpoint (OpenAI, Azure OpenAI, any compatible
server), named judges and keys, rate limits, and prompt templates. Imports only ``core``."""
