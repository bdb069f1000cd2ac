//go:build tools

// Package tools pins the Kubernetes commands Ptah's local control plane builds.
// It is never compiled; it only keeps these packages in go.mod and go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
