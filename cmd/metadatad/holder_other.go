//go:build !linux

package main

// lockHolder names the process holding dir's lock where the system tells;
// this one does not.
func lockHolder(string) string { return "" }
