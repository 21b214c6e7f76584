// Package crc holds the one CRC-32C (Castagnoli) table every brokercore file
// format checksums with, so no package builds a drifting copy of its own.
//
// This is a copy of the brokercore library's internal/crc, kept in the
// cluster module because examples never import the library's internal
// packages; the cluster's raft log (raftlog*.go) is its user.
package crc

import "hash/crc32"

// Table is the Castagnoli table (hardware-accelerated on amd64 and arm64).
var Table = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, Table) }

// Update returns the CRC-32C of the data checksummed into c followed by b.
func Update(c uint32, b []byte) uint32 { return crc32.Update(c, Table, b) }
