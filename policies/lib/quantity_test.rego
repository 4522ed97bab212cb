package vgate.lib.quantity_test

import rego.v1

import data.vgate.lib.quantity

# Values resource.Quantity documents (k8s.io/apimachinery/pkg/api/resource/quantity.go and the
# "Resource units in Kubernetes" page: 128974848, 129e6, 129M, 128974848000m and 123Mi are about
# the same value), and what a raw Volcano Job template may hold.
test_values_as_kubernetes_reads_them if {
	cases := [
		[128974848, 128974848],
		["128974848", 128974848],
		["129e6", 129000000],
		["129E6", 129000000],
		["129M", 129000000],
		["128974848000m", 128974848],
		["123Mi", 128974848],
		["1Ki", 1024],
		["1k", 1000],
		["300Gi", 322122547200],
		[322122547200, 322122547200],
		["0.5", 0.5],
		[".5", 0.5],
		["5.", 5],
		["100m", 0.1],
		["1.5Gi", 1610612736],
		["+2", 2],
		["-2", -2],
		["1e-3", 0.001],
		["1e0", 1],
		["2n", 0.000000002],
		["3u", 0.000003],
		["1Ei", 1152921504606846976],
	]
	every case in cases {
		quantity.value(case[0]) == case[1]
	}
}

test_bytes_round_up_as_quantity_value_does if {
	quantity.bytes("68719476736.5") == 68719476737
	quantity.bytes(68719476736.5) == 68719476737
	quantity.bytes("100m") == 1
	quantity.bytes("64Gi") == 68719476736
	quantity.bytes("64.000000000000001Gi") == 68719476737
	quantity.bytes("1.5m") == 1
	quantity.bytes("1.5k") == 1500
	quantity.bytes("0.1e1") == 1
}

test_what_kubernetes_rejects_is_undefined if {
	every q in ["300GB", "1.2.3", "Gi", "", " 1Gi", "1Gi ", "1gi", "1e", "e3", "1e123", "0x10", true, null, {}, ["1Gi"]] {
		not quantity.value(q)
	}
}

# Whole digits with a binary or whole decimal suffix take a shorter way: the same bytes as the rest.
test_bytes_of_whole_quantities_and_the_rest_agree if {
	quantity.bytes("1Ei") == 1152921504606846976
	quantity.bytes("1E") == 1000000000000000000
	quantity.bytes("007Ki") == 7168
	quantity.bytes("-64Gi") == -68719476736
	quantity.bytes("5.") == 5
	quantity.bytes("129M") == quantity.bytes("129e6")
	quantity.bytes("129M") == quantity.bytes("129000000.0")
	quantity.bytes("4096Mi") == quantity.bytes("4Gi")
}

test_what_kubernetes_rejects_has_no_bytes if {
	every q in ["300GB", "1.2.3", "Gi", "", ".", "1gi", "1e", "e3", "1e123", true, null, {}, ["1Gi"]] {
		not quantity.bytes(q)
	}
}
