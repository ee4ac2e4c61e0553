//go:build !amd64

package main

func archSyscalls() {}
