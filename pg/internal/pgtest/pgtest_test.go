package pgtest

import (
	"context"
	"testing"
)

func TestStart(t *testing.T) {
	s := StartT(t)
	c := s.Super(t)
	var v string
	if err := c.QueryRow(context.Background(), "SHOW server_version").Scan(&v); err != nil {
		t.Fatal(err)
	}
	t.Log("server", v)
}
