"""Billing dates: a subscription is billed on the same day of each month."""

import datetime

from daycount import days_in_month


def add_months(day, months):
    """The same day of the month `months` later (or earlier, if negative), moved back to the
    month's last day when the month is shorter."""
    total = day.month + months
    year = day.year + total // 12
    month = total % 12 or 12
    return datetime.date(year, month, min(day.day, days_in_month(year, month)))


def billing_dates(start, count):
    """The first `count` billing dates of a subscription that started on `start`: each is
    counted from the start, so a subscription of the 31st is billed on the 31st whenever the
    month has one."""
    return [add_months(start, i) for i in range(count)]
