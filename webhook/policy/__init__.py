"""The policy engines behind the core's one seam: Rego sources, the generated entry, regorus
(its RVM and its interpreter) in process, and OPA over HTTP. Depends on the core only."""
