"""skiplock's own pools on a Django database reach it with the TLS settings of ``DATABASES``
(issue 22 medium 4), against a throwaway PostgreSQL that accepts only TLS with a client
certificate signed by a CA the test made (tests/tls_postgres.py): the backend's app migrates
and counts through its asyncpg pool, verifying the server; a wrong CA is refused."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings

from skiplock.contrib.django.backend import SkiplockBackend
from skiplock.errors import BackendUnavailable
from tests.tls_postgres import KEY_PASSPHRASE, TlsCluster, available, tls_cluster

pytestmark = pytest.mark.skipif(not available(), reason="needs initdb (PostgreSQL 15) and openssl")


@pytest.fixture(scope="module")
def cluster() -> Iterator[TlsCluster]:
    with tls_cluster() as made:
        yield made


@pytest.fixture
def tls_backend(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A SkiplockBackend on a DATABASES alias ``tls`` (set by the test), closed afterwards."""
    made: list[Any] = []

    def make(options: dict[str, str]) -> Any:
        cluster: TlsCluster = request.getfixturevalue("cluster")
        settings.DATABASES["tls"] = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "postgres",
            "USER": "postgres",
            "HOST": "localhost",
            "PORT": str(cluster.port),
            "OPTIONS": options,
        }
        backend = SkiplockBackend("tls", {"OPTIONS": {"database": "tls"}})
        made.append(backend)
        return backend

    yield make
    for backend in made:
        if backend._app is not None:
            backend.app.run_sync(backend.app.close())
    settings.DATABASES.pop("tls", None)


def _verified(cluster: TlsCluster, **overrides: str) -> dict[str, str]:
    """OPTIONS that verify the server against the test's CA and present the client certificate."""
    return {
        "sslmode": "verify-full",
        "sslrootcert": str(cluster.ca),
        "sslcert": str(cluster.client_cert),
        "sslkey": str(cluster.client_key),
        **overrides,
    }


def test_skiplock_pool_connects_with_the_databases_tls_options(
    cluster: TlsCluster, tls_backend: Any
) -> None:
    app = tls_backend(_verified(cluster)).app
    app.run_sync(app.migrate())
    assert app.run_sync(app.counts()) is not None


def test_an_encrypted_client_key_is_opened_with_sslpassword(
    cluster: TlsCluster, tls_backend: Any
) -> None:
    options = _verified(cluster, sslkey=str(cluster.encrypted_key), sslpassword=KEY_PASSPHRASE)
    app = tls_backend(options).app
    app.run_sync(app.migrate())
    assert KEY_PASSPHRASE not in repr(app) and "sslpassword=***" in repr(app)


def test_a_server_the_root_certificate_did_not_sign_is_refused(
    cluster: TlsCluster, tls_backend: Any
) -> None:
    app = tls_backend(_verified(cluster, sslrootcert=str(cluster.other_ca))).app
    with pytest.raises(BackendUnavailable, match="CERTIFICATE_VERIFY_FAILED") as caught:
        app.run_sync(app.migrate())
    assert isinstance(caught.value.__cause__, ssl.SSLCertVerificationError)
