/**
 * The catalog browser panel: a heading with a refresh button, who lists which catalog, a search box,
 * an error line and the tree.
 *
 * It draws `CatalogModel.rows()` as a flat list (indented by depth) and redraws on every model
 * change; clicks and keys call the model. Stable hooks for tests and styles:
 * `.uc-CatalogBrowser` (the panel, id `uc-jupyter-catalog`), `.uc-CatalogBrowser-search`,
 * `.uc-CatalogBrowser-refresh`, `.uc-CatalogBrowser-who`, `.uc-CatalogBrowser-error`, `.uc-CatalogTree` and its rows
 * `.uc-CatalogTree-item` (`data-uc-id`, `data-uc-kind`, `data-uc-name`, `data-uc-readable`,
 * `aria-expanded`, `title` = the full name or path), their `.uc-CatalogTree-label` (split into
 * `.uc-CatalogTree-labelHead` and `.uc-CatalogTree-labelTail`: a long name loses its middle, not its
 * end) and `.uc-CatalogTree-message` (`data-uc-message` = loading|error|empty|more; the "Show more"
 * row is also `.uc-CatalogTree-more`, with `data-uc-owner` = the folder's id).
 */
import { caretDownIcon, caretRightIcon, refreshIcon } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import { Widget } from '@lumino/widgets';

import { CatalogModel, IOpenState, Row } from './catalogModel';
import { copyText, isExpandable, ITreeNode, splitName, tooltip } from './catalogNodes';
import { catalogIcon, iconFor } from './icons';

export const ITEM_CLASS = 'uc-CatalogTree-item';
export const MORE_CLASS = 'uc-CatalogTree-more';

export class CatalogBrowser extends Widget {
  readonly model: CatalogModel;
  private readonly searchInput: HTMLInputElement;
  private readonly errorLine: HTMLElement;
  private readonly tree: HTMLElement;
  private readonly stopListening: () => void;
  private started = false;
  /** The folder whose "Show more" was pressed from the keyboard, until its page is drawn. */
  private moreFocus: string | null = null;
  /** What was open before the page was reloaded: reopened by the first listing. */
  restore: IOpenState | null = null;
  private readonly whoLine: HTMLElement;

  constructor(model: CatalogModel) {
    super();
    this.model = model;
    this.id = 'uc-jupyter-catalog';
    this.addClass('uc-CatalogBrowser');
    this.title.icon = catalogIcon;
    this.title.caption = 'Unity Catalog';

    const toolbar = document.createElement('div');
    toolbar.className = 'uc-CatalogBrowser-toolbar';
    const heading = document.createElement('span');
    heading.className = 'uc-CatalogBrowser-heading';
    heading.textContent = 'Unity Catalog';
    this.searchInput = document.createElement('input');
    this.searchInput.type = 'search';
    this.searchInput.className = 'uc-CatalogBrowser-search jp-mod-styled';
    this.searchInput.placeholder = 'Filter loaded names';
    this.searchInput.setAttribute('aria-label', 'Filter loaded names');
    this.searchInput.addEventListener('input', () => this.model.setFilter(this.searchInput.value));
    const refresh = document.createElement('button');
    refresh.type = 'button';
    refresh.className = 'uc-CatalogBrowser-refresh jp-ToolbarButtonComponent jp-mod-minimal jp-Button';
    refresh.title = 'Refresh the catalog';
    refresh.setAttribute('aria-label', 'Refresh the catalog');
    refreshIcon.element({ container: refresh, elementPosition: 'center', height: '16px', width: '16px' });
    refresh.addEventListener('click', () => void this.model.refresh());
    const top = document.createElement('div');
    top.className = 'uc-CatalogBrowser-header';
    top.append(heading, refresh);
    this.whoLine = document.createElement('div');
    this.whoLine.className = 'uc-CatalogBrowser-who';
    toolbar.append(top, this.whoLine, this.searchInput);

    this.errorLine = document.createElement('div');
    this.errorLine.className = 'uc-CatalogBrowser-error';
    this.errorLine.setAttribute('role', 'alert');

    this.tree = document.createElement('ul');
    this.tree.className = 'uc-CatalogTree';
    this.tree.setAttribute('role', 'tree');
    this.tree.addEventListener('click', event => this.onClick(event));
    this.tree.addEventListener('keydown', event => this.onKey(event));
    // Right-click selects the row first, so context-menu commands act on it.
    this.tree.addEventListener('contextmenu', event => {
      const node = this.nodeOf(event.target);
      if (node) {
        this.model.select(node);
      }
    });

    this.node.append(toolbar, this.errorLine, this.tree);
    this.stopListening = this.model.onChange(() => this.render());
    this.render();
  }

  /** The catalogs are listed when the panel is first shown, not before. */
  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    if (!this.started) {
      this.started = true;
      void this.model.refresh(this.restore ?? undefined);
    }
  }

  /** Says who lists the catalog and which catalog it is, under the heading. */
  setWho(principal: string, catalog: string): void {
    this.whoLine.textContent = `${principal} · ${catalog}`;
    this.whoLine.title = `Listing as ${principal}: only what ${principal} may see is shown.\n${catalog}`;
  }

  dispose(): void {
    this.stopListening();
    super.dispose();
  }

  /** The tree node drawn by the row that holds `target`, if any. */
  nodeOf(target: EventTarget | null): ITreeNode | null {
    const row = target instanceof Element ? target.closest(`.${ITEM_CLASS}`) : null;
    const id = row?.getAttribute('data-uc-id');
    return id ? this.model.find(id) : null;
  }

  /** Draws the model as it is now. */
  render(): void {
    const model = this.model;
    this.errorLine.textContent = model.error ?? '';
    this.errorLine.hidden = model.error === null;
    this.node.setAttribute('data-uc-loading', String(model.loading));

    const rows = model.rows();
    const focusedId = document.activeElement?.closest(`.${ITEM_CLASS}`)?.getAttribute('data-uc-id');
    const items = rows.map(row => this.renderRow(row));
    if (rows.length === 0) {
      items.push(this.placeholder());
    }
    this.tree.replaceChildren(...items);
    if (focusedId) {
      this.tree.querySelector<HTMLElement>(`[data-uc-id="${CSS.escape(focusedId)}"]`)?.focus();
    }
    this.restoreMoreFocus();
  }

  /**
   * Keeps the keyboard where "Show more" was pressed: on the folder's new "Show more" row once the
   * page has come, or on its last entry when there is nothing more.
   */
  private restoreMoreFocus(): void {
    const folder = this.moreFocus === null ? null : this.model.find(this.moreFocus);
    if (!folder || folder.loadingMore) {
      this.moreFocus = folder ? this.moreFocus : null;
      return;
    }
    this.moreFocus = null;
    const more = this.tree.querySelector<HTMLElement>(`.${MORE_CLASS}[data-uc-owner="${CSS.escape(folder.id)}"]`);
    const last = folder.children?.[folder.children.length - 1];
    const target =
      more ?? (last ? this.tree.querySelector<HTMLElement>(`[data-uc-id="${CSS.escape(last.id)}"]`) : null);
    target?.focus();
  }

  private placeholder(): HTMLElement {
    const li = document.createElement('li');
    li.className = 'uc-CatalogTree-message';
    if (this.model.loading) {
      li.dataset.ucMessage = 'loading';
      li.textContent = 'Loading…';
    } else if (this.model.filter) {
      li.dataset.ucMessage = 'empty';
      li.textContent = 'No loaded name matches';
    } else if (this.model.roots !== null && this.model.error === null) {
      li.dataset.ucMessage = 'empty';
      li.textContent = 'No catalogs you may use';
    } else {
      li.hidden = true;
    }
    return li;
  }

  private renderRow(row: Row): HTMLElement {
    const li = document.createElement('li');
    li.style.paddingLeft = `${4 + row.depth * 14}px`;
    if (row.type === 'message') {
      li.className = `uc-CatalogTree-message uc-mod-${row.kind}`;
      li.dataset.ucMessage = row.kind;
      li.textContent = row.text;
      if (row.kind === 'error') {
        li.setAttribute('role', 'alert');
      }
      if (row.kind === 'more' && row.owner) {
        li.classList.add(MORE_CLASS);
        li.dataset.ucOwner = row.owner.id;
        li.setAttribute('role', 'button');
        li.tabIndex = 0;
        li.title = `Load the next entries of ${copyText(row.owner)}`;
      }
      return li;
    }
    const node = row.node;
    li.className = ITEM_CLASS;
    li.setAttribute('role', 'treeitem');
    li.tabIndex = 0;
    li.dataset.ucId = node.id;
    li.dataset.ucKind = node.kind;
    li.dataset.ucName = copyText(node);
    li.dataset.ucReadable = String(node.readable);
    if (!node.readable) {
      li.classList.add('uc-mod-unreadable');
    }
    if (this.model.selected?.id === node.id) {
      li.classList.add('jp-mod-selected');
      li.setAttribute('aria-selected', 'true');
    }
    const expandable = isExpandable(node);
    if (expandable) {
      li.setAttribute('aria-expanded', String(row.expanded));
    }
    const caret = document.createElement('span');
    caret.className = 'uc-CatalogTree-caret';
    if (expandable) {
      (row.expanded ? caretDownIcon : caretRightIcon).element({
        container: caret,
        elementPosition: 'center',
        height: '16px',
        width: '16px'
      });
    }
    const icon = document.createElement('span');
    icon.className = 'uc-CatalogTree-icon';
    iconFor(node.kind).element({ container: icon, elementPosition: 'center', height: '16px', width: '16px' });
    li.append(caret, icon, nameLabel(node.name));
    if (node.detail) {
      const detail = document.createElement('span');
      detail.className = 'uc-CatalogTree-detail';
      detail.textContent = node.detail;
      li.append(detail);
    }
    li.title = tooltip(node);
    return li;
  }

  /** The folder whose "Show more" row holds `target`, if any. */
  private moreOf(target: EventTarget | null): ITreeNode | null {
    const row = target instanceof Element ? target.closest(`.${MORE_CLASS}`) : null;
    const id = row?.getAttribute('data-uc-owner');
    return id ? this.model.find(id) : null;
  }

  private onClick(event: MouseEvent): void {
    const folder = this.moreOf(event.target);
    if (folder) {
      void this.model.more(folder);
      return;
    }
    const node = this.nodeOf(event.target);
    if (!node) {
      return;
    }
    this.model.select(node);
    void this.model.toggle(node);
  }

  private onKey(event: KeyboardEvent): void {
    const folder = this.moreOf(event.target);
    if (folder && (event.key === 'Enter' || event.key === ' ')) {
      event.preventDefault();
      this.moreFocus = folder.id;
      void this.model.more(folder);
      return;
    }
    const node = this.nodeOf(event.target);
    if (!node) {
      return;
    }
    const items = [...this.tree.querySelectorAll<HTMLElement>(`.${ITEM_CLASS}`)];
    const index = items.findIndex(item => item.dataset.ucId === node.id);
    const focus = (i: number) => {
      const item = items[Math.max(0, Math.min(items.length - 1, i))];
      if (item) {
        item.focus();
        const target = this.model.find(item.dataset.ucId ?? '');
        this.model.select(target);
      }
    };
    switch (event.key) {
      case 'Enter':
      case ' ':
        this.model.select(node);
        void this.model.toggle(node);
        break;
      case 'ArrowRight':
        void this.model.expand(node);
        break;
      case 'ArrowLeft':
        this.model.collapse(node);
        break;
      case 'ArrowDown':
        focus(index + 1);
        break;
      case 'ArrowUp':
        focus(index - 1);
        break;
      default:
        return;
    }
    event.preventDefault();
  }
}

/**
 * A name that, when too long, loses its middle: the head half ends in "…", the tail half (laid out
 * right to left, so it overflows at its start) shows its end. The tail's text sits in a
 * left-to-right isolate, so its characters keep their order.
 */
function nameLabel(name: string): HTMLElement {
  const label = document.createElement('span');
  label.className = 'uc-CatalogTree-label';
  const [head, tail] = splitName(name);
  const headPart = document.createElement('span');
  headPart.className = 'uc-CatalogTree-labelHead';
  headPart.textContent = head;
  label.append(headPart);
  if (tail) {
    const tailPart = document.createElement('span');
    tailPart.className = 'uc-CatalogTree-labelTail';
    const text = document.createElement('bdi');
    text.dir = 'ltr';
    text.textContent = tail;
    tailPart.append(text);
    label.append(tailPart);
  }
  return label;
}
