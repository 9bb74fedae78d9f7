"""Password sign-in identifies people: named users each sign in only as themselves with their own scrypt
hash; the shared password's name is recorded as "NAME (unverified)", so it can never replace a reviewer's
verdict or note; wrong passwords are limited per client and per server with a growing wait (the clock is
stepped, never slept through). AppTest through the real form on a real store."""
from __future__ import annotations

import hashlib

import pytest

from evaluators import load_dataset
from evaluators.store.schema import Result
from tests.conftest import ROOT
from tests.test_sign_in import routed_as_on_a_server  # noqa: F401 (fixture)
from tests.test_sign_in_config import secrets_file  # noqa: F401 (fixture)
from ui import auth, passwords
from ui.attempts import Attempts
from ui.auth import PASSWORD_ENV, USER

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")

SHARED, ALICE, BOB = "team password", "alice's own", "bob's own"
CHEAP = (2 ** 14, 8, 1)  # the lowest cost accepted: the tests' hashes take ~50 ms each


def _scrypt_line(password: str, salt: str = "saltsaltSALT1234") -> str:
    """A hash in Werkzeug's format, made here with hashlib alone (not with ui.passwords)."""
    n, r, p = CHEAP
    digest = hashlib.scrypt(password.encode(), salt=salt.encode(), n=n, r=r, p=p, maxmem=132 * n * r * p, dklen=64)
    return f"scrypt:{n}:{r}:{p}${salt}${digest.hex()}"


def test_a_made_hash_is_scrypt_in_werkzeugs_format_and_checks_only_its_password():
    made = passwords.make("pässword")
    method, salt, hexdigest = made.split("$")
    assert method == "scrypt:32768:8:1" and len(salt) == 16 and salt.isalnum()
    expected = hashlib.scrypt("pässword".encode(), salt=salt.encode(), n=32768, r=8, p=1, maxmem=2 ** 26, dklen=64)
    assert hexdigest == expected.hex()
    assert passwords.make("pässword").split("$")[1] != salt  # a new salt each time
    assert passwords.verify("pässword", made) and not passwords.verify("password", made)
    outside = _scrypt_line(ALICE)  # made without our code: accepted
    assert passwords.verify(ALICE, outside) and not passwords.verify(BOB, outside)


def _conf(users: bool = True, shared: bool = True) -> auth.SignIn:
    return auth.SignIn(password_sha256=hashlib.sha256(SHARED.encode()).hexdigest() if shared else None,
                       users=(("alice", _scrypt_line(ALICE)), ("Bob", _scrypt_line(BOB))) if users else ())


@pytest.mark.parametrize("users,name,password,expected", [
    (True, "alice", ALICE, "alice"), (True, " ALICE ", ALICE, "alice"), (True, "bob", BOB, "Bob"),
    (True, "alice", BOB, None), (True, "bob", ALICE, None),  # a named user is only themself...
    (True, "alice", SHARED, None), (True, "Alice", SHARED, None),  # ...never with the shared password
    (True, "carol", SHARED, "carol (unverified)"), (True, "carol", ALICE, None),
    (False, "alice", SHARED, "alice (unverified)"), (False, "alice (unverified)", SHARED,
                                                     "alice (unverified) (unverified)"),
    (False, "alice", "wrong", None), (False, "é" * 300, SHARED, "é" * 187 + " (unverified)")])
def test_who_a_name_and_password_sign_in_as(users, name, password, expected, home_store):
    assert auth.identify(_conf(users), name, password) == expected


def _sign_in(at, name: str, password: str):
    at.text_input(key="auth.name").input(name)
    at.text_input(key="auth.password").input(password)
    next(b for b in at.button if b.label == "Sign in").click()
    return at.run()


@pytest.fixture
def reviewed(home_store):
    """A run whose row 1 alice reviewed: 5, with a note."""
    ds = load_dataset([{"query": f"q{i}", "response": f"r{i}"} for i in range(3)])
    rid = home_store.create_run(home_store.save_dataset(ds), {"metrics": ["coherence"],
                                                              "thresholds": {"coherence": 3}}, "h", "run")
    home_store.write_results(rid, [Result(i, "coherence", 0, "ok", 3.0, {"coherence": 3.0}) for i in range(3)])
    home_store.update_run(rid, status="completed", tasks_total=3, tasks_done=3)
    home_store.save_review(rid, 1, "coherence", "alice", 5.0, note="alice: clearly fine")
    return home_store, rid


def _mine(store, rid):
    return sorted((r["reviewer"], r["row_idx"], r["value"], r["note"]) for r in store.reviews(rid))


def test_with_the_shared_password_alice_cannot_replace_alices_verdict_or_note(reviewed, monkeypatch,
                                                                            routed_as_on_a_server):
    store, rid = reviewed
    monkeypatch.setenv(PASSWORD_ENV, hashlib.sha256(SHARED.encode()).hexdigest())
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    _sign_in(at, "alice", SHARED)
    assert at.session_state[USER] == "alice (unverified)"
    at.switch_page("pages/review.py")
    at.query_params.update({"run": rid, "row": "2"})
    at.run()
    assert not at.exception and any(t.value == "alice (unverified)" for t in at.sidebar.text)
    at.text_input(key="review.row.alice (unverified).note.1").input("not alice").run()
    next(b for b in at.button if b.label == "1" and not b.disabled).click()  # the verdict 1 on row 1
    at.run()
    assert _mine(store, rid) == [("alice", 1, 5.0, "alice: clearly fine"),  # hers, unchanged
                                 ("alice (unverified)", 1, 1.0, "not alice")]


def test_a_named_user_signs_in_only_as_themself(reviewed, secrets_file, routed_as_on_a_server):
    store, rid = reviewed
    secrets_file.write_text(f'[evaldash]\npassword_sha256 = "{hashlib.sha256(SHARED.encode()).hexdigest()}"\n'
                            f'[evaldash.users]\nalice = "{_scrypt_line(ALICE)}"\nbob = "{_scrypt_line(BOB)}"\n')
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    for name, password in (("alice", SHARED), ("alice", BOB), ("Alice", "")):
        _sign_in(at, name, password)
        assert [e.value for e in at.error] == ["Wrong name or password."] and USER not in at.session_state
    _sign_in(at, "Alice", ALICE)
    assert at.session_state[USER] == "alice"  # the configured name, verified
    at.switch_page("pages/review.py")
    at.query_params.update({"run": rid, "row": "2"})
    at.run()
    # her row is answered: no key is aimed at it until she picks the verdict to change
    assert not [b for b in at.button if b.label == "2"]
    next(b for b in at.button if b.label == "Change your verdict").click()
    at.run()
    next(b for b in at.button if b.label == "2" and not b.disabled).click()
    at.run()
    assert _mine(store, rid) == [("alice", 1, 2.0, None)]  # her own verdict, which she may change


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_wrong_passwords_wait_longer_and_longer_per_client_and_per_server():
    clock = Clock()
    tries = Attempts(clock, free_client=5, free_server=20)
    for _ in range(5):
        assert tries.wait("10.0.0.1") == 0
        tries.failed("10.0.0.1")
    assert tries.wait("10.0.0.1") == 2.0 and tries.wait("10.0.0.2") == 0  # one client waits, not another
    expected = [2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    for wait in expected:
        assert tries.wait("10.0.0.1") == wait
        clock.now += wait - 0.5
        assert tries.wait("10.0.0.1") == 0.5  # not yet
        clock.now += 0.5
        assert tries.wait("10.0.0.1") == 0
        tries.failed("10.0.0.1")
    assert tries.wait("10.0.0.1") == 128.0
    # 30 wrong passwords in 36 s (the count): at most 8 are looked at
    clock, looked = Clock(), 0
    tries = Attempts(clock, free_client=5, free_server=20)
    for step in range(30):
        clock.now = 1000.0 + step * 36 / 30
        if tries.wait("attacker") == 0:
            looked += 1
            tries.failed("attacker")
    assert looked == 8  # 5 at once, then after 2, 4 and 8 s
    # a success clears its client's count; a quiet spell forgets it
    tries.succeeded("attacker")
    assert tries.wait("attacker") == 0
    # the server: 20 failures from 20 addresses, then everyone waits, the right password or not
    clock = Clock()
    tries = Attempts(clock, free_client=5, free_server=20)
    for i in range(20):
        tries.failed(f"10.1.0.{i}")
    assert tries.wait("10.9.9.9") == 2.0
    clock.now += 2.0 + 60.0 + 0.1  # its wait and a quiet minute: forgotten
    assert tries.wait("10.9.9.9") == 0


def test_tries_started_at_once_are_counted_as_they_start():
    """Found by review: the form checked the wait, then spent ~0.1 s on the password's hash, then counted the
    failure; 40 sessions (tabs) trying at once all passed the check before any was counted. A try is now
    counted as it starts (begin), in one locked step: of 40 started before any has finished, 5 are looked at,
    and of 40 from 40 addresses, 20 (the server's allowance); a right password takes its try back."""
    import threading

    clock = Clock()
    tries = Attempts(clock, free_client=5, free_server=20)
    assert [tries.begin("10.0.0.1") for _ in range(40)].count(0.0) == 5  # none finished yet
    tries = Attempts(clock, free_client=5, free_server=20)
    barrier, admitted, lock = threading.Barrier(40), [], threading.Lock()

    def one(i: int) -> None:
        barrier.wait()
        if tries.begin(f"10.2.0.{i}") == 0.0:
            with lock:
                admitted.append(i)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(admitted) == 20 and tries.wait("10.9.9.9") > 0
    tries = Attempts(clock, free_client=5, free_server=20)
    for i in range(19):
        assert tries.begin(f"10.3.0.{i}") == 0.0
    tries.succeeded("10.3.0.0")  # its try taken back: the server has 18 failures, so 2 more may try
    assert tries.begin("10.4.0.1") == 0.0 and tries.begin("10.4.0.2") == 0.0 and tries.begin("10.4.0.3") > 0


def test_the_form_refuses_without_looking_at_the_password_while_a_client_waits(home_store, monkeypatch,
                                                                              routed_as_on_a_server):
    monkeypatch.setenv(PASSWORD_ENV, hashlib.sha256(SHARED.encode()).hexdigest())
    clock = Clock()
    tries = Attempts(clock)
    monkeypatch.setattr(auth, "attempts", lambda: tries)
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    for _ in range(5):
        _sign_in(at, "ana", "guess")
        assert [e.value for e in at.error] == ["Wrong password."]
    _sign_in(at, "ana", SHARED)  # the right password, while waiting: refused all the same
    assert [e.value for e in at.error] == ["Too many wrong passwords: try again in 2 s."]
    assert USER not in at.session_state
    clock.now += 2.0
    _sign_in(at, "ana", SHARED)
    assert at.session_state[USER] == "ana (unverified)"
    assert tries.wait("local") == 0  # the success cleared the count


def test_the_hash_command_prints_a_line_for_the_users_table(monkeypatch, capsys):
    import tomllib

    typed = iter(["s3cret pass", "s3cret pass"])
    monkeypatch.setattr("getpass.getpass", lambda prompt="": next(typed))  # as typed at the terminal, twice
    assert passwords.main(['ana "the reviewer"']) == 0
    users = tomllib.loads("[evaldash.users]\n" + capsys.readouterr().out)["evaldash"]["users"]
    [(name, line)] = users.items()
    n, r, p, salt, hexdigest = passwords.check(line)
    assert name == 'ana "the reviewer"' and (n, r, p) == (32768, 8, 1)
    assert hexdigest == hashlib.scrypt(b"s3cret pass", salt=salt.encode(), n=n, r=r, p=p, maxmem=2 ** 26, dklen=64).hex()
    typed = iter(["one", "other"])
    assert passwords.main(["ana"]) == 1 and capsys.readouterr().out == ""  # two different: nothing printed
