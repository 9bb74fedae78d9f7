"""The page every address serves until the session signs in (see app.py and ui.auth)."""
from ui import auth

auth.sign_in_page()
