"""The decision log: written durably and hash-chained by the server, verified by ``vgate audit verify``."""
