"""The one error type users see: a single line saying what, where and how to fix."""


class ForgetbenchError(Exception):
    """Bad input or an impossible request. The CLI prints ``forgetbench: error: <msg>`` and exits 2."""

    exit_code = 2
