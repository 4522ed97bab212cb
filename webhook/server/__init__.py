"""The HTTPS server around the core: Flask app, gateway (decode, decide, record, count), wiring,
hot reload, gunicorn, certificates and metrics. The outermost layer but for the CLI."""
