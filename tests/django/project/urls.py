"""The test project's URLs: the admin, where skiplock's jobs are browsed."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
