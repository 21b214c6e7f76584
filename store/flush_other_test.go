//go:build !unix

package store

func flushDirtyPages() {}
