package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"sandman/db/dbtest"
)

// A uuid.UUID argument reaches the database as the same uuid whether its parameter is a uuid,
// text or NULL, and a uuid parameter takes its 16 bytes directly (two allocations; through its
// text and back, twenty), not its text parsed back (db.encodeUUIDs).
func TestUUIDArgumentsAreSentAsTheirBytes(t *testing.T) {
	ctx := context.Background()
	pool := dbtest.NewPool(t)
	id := uuid.New()
	var asUUID, asText string
	var isNull bool
	if err := pool.QueryRow(ctx, "SELECT $1::uuid::text, $2::text, $3::uuid IS NULL", id, id, (*uuid.UUID)(nil)).
		Scan(&asUUID, &asText, &isNull); err != nil {
		t.Fatal(err)
	}
	if asUUID != id.String() || asText != id.String() || !isNull {
		t.Fatalf("sent %s as a uuid, as text and a nil one: the database read %s, %s, NULL %v", id, asUUID, asText, isNull)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	m := conn.Conn().TypeMap()
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id, buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Fatalf("encoding a uuid.UUID argument makes %.0f allocations, want at most 2: it went through its text (driver.Valuer), not its bytes", allocs)
	}
}
