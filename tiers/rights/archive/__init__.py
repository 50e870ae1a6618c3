"""A user's memory as a file: the export format, writing it from the stores and applying it to
them."""
