"""The wire: requests checked into domain values, domain records into messages, errors into status
codes."""
