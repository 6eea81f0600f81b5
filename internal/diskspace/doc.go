// Package diskspace guards the free space of the filesystem a store writes
// to. Below a floor it refuses the writes that add data, so the engine never
// meets a full disk in the middle of a commit (in the spirit of etcd's space
// quota alarm and CockroachDB's ballast file); reads go on, and writes
// resume by themselves once space is freed.
package diskspace
