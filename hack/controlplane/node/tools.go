//go:build tools

// Package tools pins the Kubernetes node commands Ptah's dev cluster builds for its
// real node: kubelet and kube-scheduler (the `kubernetes` Service is an nft DNAT, so
// no kube-proxy). A module of its own, so that adding them never changes the stamps of
// the control-plane binaries built from ../k8s.
// It is never compiled; it only keeps these packages in go.mod and go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
