// Package store is brokercore's append-only message log.
package store
