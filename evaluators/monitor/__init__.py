"""Production traffic in: OpenTelemetry traces received, mapped to rows, sampled and judged online."""
