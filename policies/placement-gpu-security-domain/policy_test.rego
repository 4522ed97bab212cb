package vgate.rules_test.placement_gpu_security_domain

import rego.v1

import data.vgate.lib.testing

# The rule under test (its folder's name, as its package writes it).
rule := "placement_gpu_security_domain"

gpu_spec(selector) := object.union(selector, {"containers": [{
	"name": "cuda",
	"resources": {"limits": {"nvidia.com/gpu": "2"}},
}]})

test_allows_pool_of_own_domain if {
	count(testing.denials(rule, testing.pod_in(
		"ml-inference", {},
		gpu_spec({"nodeSelector": {"vgate.io/node-pool": "gpu-secure"}}),
	))) == 0
}

test_denies_pool_of_another_domain if {
	review := testing.pod_in("ml-inference", {}, gpu_spec({"nodeSelector": {"vgate.io/node-pool": "gpu-shared"}}))
	some violation in testing.denials(rule, review)
	contains(violation, `node pools ["gpu-shared"] outside security domain "confidential"`)
}

test_denies_unpinned_gpu_pod if {
	some violation in testing.denials(rule, testing.pod_in("web", {}, gpu_spec({})))
	contains(violation, `pin one of ["gpu-shared"]`)
}

test_an_amount_that_is_not_a_plain_number_still_counts if {
	spec := {"containers": [{"name": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1k"}}}]}
	count(testing.denials(rule, testing.pod_in("web", {}, spec))) == 1
}

test_zero_accelerators_is_no_request if {
	every zero in ["0", 0, "0m", "0.0", "0Ki"] {
		spec := {"containers": [{"name": "cuda", "resources": {"limits": {"nvidia.com/gpu": zero}}}]}
		count(testing.denials(rule, testing.pod_in("web", {}, spec))) == 0
	}
}

test_an_amount_that_is_no_quantity_counts if {
	every amount in ["one", true, "0x1"] {
		spec := {"containers": [{"name": "cuda", "resources": {"limits": {"nvidia.com/gpu": amount}}}]}
		count(testing.denials(rule, testing.pod_in("web", {}, spec))) == 1
	}
}

test_denies_affinity_allowing_a_foreign_pool if {
	expression := {"key": "vgate.io/node-pool", "operator": "In", "values": ["gpu-secure", "gpu-shared"]}
	spec := gpu_spec({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
		"nodeSelectorTerms": [{"matchExpressions": [expression]}],
	}}}})
	count(testing.denials(rule, testing.pod_in("ml-inference", {}, spec))) == 1
}

test_allows_affinity_within_the_domain if {
	expression := {"key": "vgate.io/node-pool", "operator": "In", "values": ["gpu-shared"]}
	spec := gpu_spec({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
		"nodeSelectorTerms": [{"matchExpressions": [expression]}],
	}}}})
	count(testing.denials(rule, testing.pod_in("web", {}, spec))) == 0
}

test_ignores_pods_without_accelerators if {
	count(testing.denials(rule, testing.pod_in(
		"ml-inference", {},
		{"containers": [{"name": "cpu"}]},
	))) == 0
}
