package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// config is everything sandman reads from its environment (README lists each variable).
type config struct {
	DatabaseURL  string
	Addr         string
	StartCredits int32
	CookieSecure bool
	TrustProxy   bool
	LogLevel     string
	ShutdownWait time.Duration
}

func loadConfig(getenv func(string) string) (config, error) {
	c := config{
		DatabaseURL:  getenv("DATABASE_URL"),
		Addr:         orDefault(getenv("SANDMAN_ADDR"), "127.0.0.1:8080"),
		LogLevel:     orDefault(getenv("SANDMAN_LOG_LEVEL"), "info"),
		ShutdownWait: 15 * time.Second,
	}
	var errs []string
	if c.DatabaseURL == "" {
		errs = append(errs, "DATABASE_URL is not set (e.g. postgres://user@localhost:5432/sandman)")
	}
	credits, err := intEnv(getenv, "SANDMAN_START_CREDITS", 10)
	if err != nil || credits < 0 {
		errs = append(errs, "SANDMAN_START_CREDITS must be a whole number ≥ 0")
	}
	c.StartCredits = int32(credits)
	if c.CookieSecure, err = boolEnv(getenv, "SANDMAN_COOKIE_SECURE"); err != nil {
		errs = append(errs, err.Error())
	}
	if c.TrustProxy, err = boolEnv(getenv, "SANDMAN_TRUST_PROXY"); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

func intEnv(getenv func(string) string, name string, def int) (int, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	return strconv.Atoi(v)
}

func boolEnv(getenv func(string) string, name string) (bool, error) {
	v := getenv(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s must be true or false, not %q", name, v)
	}
	return b, nil
}
