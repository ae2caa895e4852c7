#!/bin/sh
# First start: initdb with the password of POSTGRES_PASSWORD, then create POSTGRES_DB. Always: listen on
# all addresses with password authentication.
set -eu
# `postgres -p 5433 ...` as with the official image: the flags follow.
if [ "${1:-}" = postgres ]; then shift; fi
user=${POSTGRES_USER:-postgres}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}" >"$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --auth=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  if [ -n "${POSTGRES_DB:-}" ] && [ "$POSTGRES_DB" != postgres ]; then
    postgres --single -D "$PGDATA" postgres <<SQL >/dev/null
CREATE DATABASE "$POSTGRES_DB";
SQL
  fi
fi
exec postgres -D "$PGDATA" -c listen_addresses='*' "$@"
