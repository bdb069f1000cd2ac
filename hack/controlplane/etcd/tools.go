//go:build tools

// Package tools pins the etcd server Ptah's local control plane builds.
package tools

import _ "go.etcd.io/etcd/server/v3"
